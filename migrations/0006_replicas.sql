CREATE TABLE `replicas` (
	`id` text PRIMARY KEY NOT NULL,
	`hostname` text NOT NULL,
	`version` text NOT NULL,
	`started_at` integer NOT NULL,
	`seen_at` integer NOT NULL
);
--> statement-breakpoint
ALTER TABLE `tasks` ADD `lease_owner` text;--> statement-breakpoint
ALTER TABLE `tasks` ADD `lease_expires_at` integer;