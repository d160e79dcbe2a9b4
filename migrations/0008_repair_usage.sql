-- Usage figures a model server's bad token counts left on tasks, sessions and deleted_task_usage
-- before the providers checked them (src/agents/providers/token-count.ts): a fraction (10.7), a
-- count past 2^53 (1e20), a cost of Infinity. Each made every listing that shows the row answer
-- 500 for good. A fractional count is rounded; a count that is negative or past 2^53 is garbage
-- and becomes 0, and so does the cost it was priced into, as does a cost that is not a finite
-- non-negative number. A session's figures are the sums of its tasks' (each model request is
-- charged to both), so a bad session row is summed again from its repaired tasks.
UPDATE `tasks` SET
	`input_tokens` = CASE WHEN `input_tokens` >= 0 AND `input_tokens` <= 9007199254740991 THEN CAST(round(`input_tokens`) AS INTEGER) ELSE 0 END,
	`output_tokens` = CASE WHEN `output_tokens` >= 0 AND `output_tokens` <= 9007199254740991 THEN CAST(round(`output_tokens`) AS INTEGER) ELSE 0 END,
	`cost_usd` = CASE WHEN `cost_usd` >= 0 AND `cost_usd` < 1e300 AND `input_tokens` >= 0 AND `input_tokens` <= 9007199254740991 AND `output_tokens` >= 0 AND `output_tokens` <= 9007199254740991 THEN `cost_usd` ELSE 0 END
WHERE NOT (typeof(`input_tokens`) = 'integer' AND `input_tokens` BETWEEN 0 AND 9007199254740991 AND typeof(`output_tokens`) = 'integer' AND `output_tokens` BETWEEN 0 AND 9007199254740991 AND `cost_usd` >= 0 AND `cost_usd` < 1e300);
--> statement-breakpoint
UPDATE `deleted_task_usage` SET
	`input_tokens` = CASE WHEN `input_tokens` >= 0 AND `input_tokens` <= 9007199254740991 THEN CAST(round(`input_tokens`) AS INTEGER) ELSE 0 END,
	`output_tokens` = CASE WHEN `output_tokens` >= 0 AND `output_tokens` <= 9007199254740991 THEN CAST(round(`output_tokens`) AS INTEGER) ELSE 0 END,
	`cost_usd` = CASE WHEN `cost_usd` >= 0 AND `cost_usd` < 1e300 AND `input_tokens` >= 0 AND `input_tokens` <= 9007199254740991 AND `output_tokens` >= 0 AND `output_tokens` <= 9007199254740991 THEN `cost_usd` ELSE 0 END
WHERE NOT (typeof(`input_tokens`) = 'integer' AND `input_tokens` BETWEEN 0 AND 9007199254740991 AND typeof(`output_tokens`) = 'integer' AND `output_tokens` BETWEEN 0 AND 9007199254740991 AND `cost_usd` >= 0 AND `cost_usd` < 1e300);
--> statement-breakpoint
UPDATE `sessions` SET
	`input_tokens` = (SELECT coalesce(sum(`input_tokens`), 0) FROM `tasks` WHERE `tasks`.`session_id` = `sessions`.`id`),
	`output_tokens` = (SELECT coalesce(sum(`output_tokens`), 0) FROM `tasks` WHERE `tasks`.`session_id` = `sessions`.`id`),
	`cost_usd` = (SELECT coalesce(sum(`cost_usd`), 0) FROM `tasks` WHERE `tasks`.`session_id` = `sessions`.`id`)
WHERE NOT (typeof(`input_tokens`) = 'integer' AND `input_tokens` BETWEEN 0 AND 9007199254740991 AND typeof(`output_tokens`) = 'integer' AND `output_tokens` BETWEEN 0 AND 9007199254740991 AND `cost_usd` >= 0 AND `cost_usd` < 1e300);
