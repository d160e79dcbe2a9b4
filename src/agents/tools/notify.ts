import { Type } from "@sinclair/typebox";
import { NO_INTEGRATION_MESSAGE } from "../../notifications/service.ts";
import { fail, ok, type Tool } from "./types.ts";

export const notifyTool: Tool = {
  name: "Notify",
  description: "Send a notification to the user's webhook (for results or events they should know about even when not watching).",
  input_schema: Type.Object({
    message: Type.String({ minLength: 1, maxLength: 4000 }),
    urgency: Type.Optional(Type.Union([Type.Literal("low"), Type.Literal("normal"), Type.Literal("high")])),
  }),
  async run(input, ctx) {
    const queued = await ctx.notify({ message: input.message as string, urgency: (input.urgency as "low" | "normal" | "high" | undefined) ?? "normal" });
    if (!queued) return fail(`Not sent. ${NO_INTEGRATION_MESSAGE}`);
    return ok(`Notification queued (${queued.id}).`);
  },
};
