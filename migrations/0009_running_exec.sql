-- The command a running task's tool call started in its workspace (pid and process start time):
-- a task resumed after a restart kills what is left of it before telling the model (src/agents/leftover-exec.ts).
ALTER TABLE `tasks` ADD `running_exec` text;