-- The delivery worker's claim (src/notifications/outbox.ts claimSql): walks the webhooks with pending
-- rows in this index, then takes each one's oldest due rows from it, instead of ranking every due row.
CREATE INDEX `notification_log_claim` ON `notification_log` (`status`,`integration_id`,`next_attempt_at`,`id`);
