-- How many times the model request of a task's current turn has been made again after a restart cut it off:
-- bounded (src/agents/loop.ts), so a server that crashes in the same answer every time does not repeat it
-- forever. 0 for the tasks before it.
ALTER TABLE `tasks` ADD `turn_repeats` integer DEFAULT 0 NOT NULL;