-- Usage figures a model server's bad token counts left on tasks, sessions and deleted_task_usage
-- before the providers checked them (src/agents/providers/token-count.ts): a count past 2^53 (a
-- bigint takes up to 2^63), a cost of Infinity or NaN. A count that is negative or past 2^53 is
-- garbage and becomes 0, and so does the cost it was priced into, as does a cost that is not a
-- finite non-negative number. A session's figures are the sums of its tasks' (each model request
-- is charged to both), so a bad session row is summed again from its repaired tasks.
-- (The SQLite side also rounds fractions; a bigint column rounded them when they were written.)
UPDATE "tasks" SET
	"input_tokens" = CASE WHEN "input_tokens" >= 0 AND "input_tokens" <= 9007199254740991 THEN "input_tokens" ELSE 0 END,
	"output_tokens" = CASE WHEN "output_tokens" >= 0 AND "output_tokens" <= 9007199254740991 THEN "output_tokens" ELSE 0 END,
	"cost_usd" = CASE WHEN "cost_usd" >= 0 AND "cost_usd" < 1e300 AND "input_tokens" >= 0 AND "input_tokens" <= 9007199254740991 AND "output_tokens" >= 0 AND "output_tokens" <= 9007199254740991 THEN "cost_usd" ELSE 0 END
WHERE NOT ("input_tokens" BETWEEN 0 AND 9007199254740991 AND "output_tokens" BETWEEN 0 AND 9007199254740991 AND "cost_usd" >= 0 AND "cost_usd" < 1e300);
--> statement-breakpoint
UPDATE "deleted_task_usage" SET
	"input_tokens" = CASE WHEN "input_tokens" >= 0 AND "input_tokens" <= 9007199254740991 THEN "input_tokens" ELSE 0 END,
	"output_tokens" = CASE WHEN "output_tokens" >= 0 AND "output_tokens" <= 9007199254740991 THEN "output_tokens" ELSE 0 END,
	"cost_usd" = CASE WHEN "cost_usd" >= 0 AND "cost_usd" < 1e300 AND "input_tokens" >= 0 AND "input_tokens" <= 9007199254740991 AND "output_tokens" >= 0 AND "output_tokens" <= 9007199254740991 THEN "cost_usd" ELSE 0 END
WHERE NOT ("input_tokens" BETWEEN 0 AND 9007199254740991 AND "output_tokens" BETWEEN 0 AND 9007199254740991 AND "cost_usd" >= 0 AND "cost_usd" < 1e300);
--> statement-breakpoint
UPDATE "sessions" SET
	"input_tokens" = (SELECT coalesce(sum("input_tokens"), 0) FROM "tasks" WHERE "tasks"."session_id" = "sessions"."id"),
	"output_tokens" = (SELECT coalesce(sum("output_tokens"), 0) FROM "tasks" WHERE "tasks"."session_id" = "sessions"."id"),
	"cost_usd" = (SELECT coalesce(sum("cost_usd"), 0) FROM "tasks" WHERE "tasks"."session_id" = "sessions"."id")
WHERE NOT ("input_tokens" BETWEEN 0 AND 9007199254740991 AND "output_tokens" BETWEEN 0 AND 9007199254740991 AND "cost_usd" >= 0 AND "cost_usd" < 1e300);
