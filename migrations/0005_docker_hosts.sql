ALTER TABLE `profiles` ADD `host_labels` text DEFAULT '[]' NOT NULL;--> statement-breakpoint
ALTER TABLE `workspaces` ADD `host` text DEFAULT 'default' NOT NULL;--> statement-breakpoint
CREATE INDEX `workspaces_host_status` ON `workspaces` (`host`,`status`);