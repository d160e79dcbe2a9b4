CREATE TABLE `playbook_missed_runs` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`playbook_id` text NOT NULL,
	`user_id` text NOT NULL,
	`trigger` text NOT NULL,
	`status` text NOT NULL,
	`error_code` text,
	`error_message` text,
	`scheduled_for` integer,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`playbook_id`) REFERENCES `playbooks`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `playbook_missed_runs_playbook` ON `playbook_missed_runs` (`playbook_id`,`id`);--> statement-breakpoint
CREATE TABLE `playbooks` (
	`id` text PRIMARY KEY NOT NULL,
	`user_id` text NOT NULL,
	`profile_id` text NOT NULL,
	`name` text NOT NULL,
	`prompt` text NOT NULL,
	`max_continuations` integer DEFAULT 0 NOT NULL,
	`max_turns` integer,
	`max_budget_usd` real,
	`schedule` text,
	`timezone` text DEFAULT 'UTC' NOT NULL,
	`enabled` integer DEFAULT true NOT NULL,
	`answer_timeout_ms` integer,
	`trigger_ciphertext` blob NOT NULL,
	`next_run_at` integer,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `playbooks_user` ON `playbooks` (`user_id`,`id`);--> statement-breakpoint
CREATE INDEX `playbooks_due` ON `playbooks` (`next_run_at`);--> statement-breakpoint
ALTER TABLE `tasks` ADD `trigger` text;--> statement-breakpoint
ALTER TABLE `tasks` ADD `max_continuations` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `tasks` ADD `scheduled_for` integer;--> statement-breakpoint
ALTER TABLE `tasks` ADD `answer_timeout_ms` integer;--> statement-breakpoint
ALTER TABLE `tasks` ADD `answer_due_at` integer;--> statement-breakpoint
CREATE INDEX `tasks_playbook` ON `tasks` (`playbook_id`,`id`);--> statement-breakpoint
CREATE INDEX `tasks_answer_due` ON `tasks` (`answer_due_at`);