CREATE TABLE "deleted_task_usage" (
	"task_id" text PRIMARY KEY NOT NULL,
	"user_id" text NOT NULL,
	"profile_id" text NOT NULL,
	"server_paid" boolean NOT NULL,
	"input_tokens" bigint NOT NULL,
	"output_tokens" bigint NOT NULL,
	"cost_usd" double precision NOT NULL,
	"created_at" bigint NOT NULL,
	"deleted_at" bigint NOT NULL
);
--> statement-breakpoint
ALTER TABLE "deleted_task_usage" ADD CONSTRAINT "deleted_task_usage_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "deleted_task_usage_user" ON "deleted_task_usage" USING btree ("user_id","created_at");