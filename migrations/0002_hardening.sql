CREATE TABLE `audit_log` (
	`id` text PRIMARY KEY NOT NULL,
	`at` integer NOT NULL,
	`actor` text NOT NULL,
	`user_id` text,
	`action` text NOT NULL,
	`target_id` text,
	`ip` text,
	`details` text
);
--> statement-breakpoint
CREATE INDEX `audit_log_user` ON `audit_log` (`user_id`,`id`);--> statement-breakpoint
CREATE INDEX `audit_log_action` ON `audit_log` (`action`,`id`);--> statement-breakpoint
CREATE INDEX `audit_log_at` ON `audit_log` (`at`);--> statement-breakpoint
ALTER TABLE `sessions` ADD `seq_reserved` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `tasks` ADD `server_paid` integer DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE `users` ADD `policy` text;--> statement-breakpoint
ALTER TABLE `workspaces` ADD `disk_bytes` integer;--> statement-breakpoint
ALTER TABLE `workspaces` ADD `disk_checked_at` integer;--> statement-breakpoint
ALTER TABLE `workspaces` DROP COLUMN `env_ciphertext`;