-- Why the model answer that ended a task stopped (end_turn, max_tokens, refusal…): shown on the task record
-- and on turn.done, so an answer cut off at the output token limit or refused is visible. Null for the tasks
-- before it (unknown) and for tasks no model answer ended.
ALTER TABLE "tasks" ADD COLUMN "stop_reason" text;