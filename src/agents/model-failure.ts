/**
 * What a task that failed on its model says (`error.message`, stored and sent in `task:failed`):
 * the provider's own message, made readable — a proxy's HTML error page becomes its status and
 * title, and any message is cut to MAX_MODEL_MESSAGE_CHARS. From a private (quiet) server, only
 * what happened (model-network.ts quietModelMessage).
 */
import { quietModelMessage } from "./model-network.ts";
import type { ModelError } from "./providers/types.ts";

export const MAX_MODEL_MESSAGE_CHARS = 1000;
const MAX_TITLE_CHARS = 200;

const HTML = /<!doctype html|<html[\s>]|<head[\s>]|<body[\s>]/i;
const TITLE = /<title[^>]*>([\s\S]*?)<\/title/i;
const ENTITIES: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'", nbsp: " ", "#39": "'" };

/** `text` cut to `max` characters, ending with an ellipsis when it was longer (a surrogate pair is not split). */
export function cutText(text: string, max: number): string {
  if (text.length <= max) return text;
  let end = max - 1;
  if (/[\uD800-\uDBFF]/.test(text[end - 1] ?? "")) end--;
  return `${text.slice(0, end)}…`;
}

/** A model error's message as a person reads it: an HTML page as its status and title, anything else cut short. */
export function readableModelMessage(message: string, status: number | undefined): string {
  if (HTML.test(message)) {
    const title = TITLE.exec(message)?.[1]
      ?.replace(/&(amp|lt|gt|quot|apos|nbsp|#39);/g, (_, e: string) => ENTITIES[e]!)
      .replace(/\s+/g, " ")
      .trim();
    const what = status ? `answered HTTP ${status} with an HTML page` : "answered with an HTML page";
    return `The model server ${what}${title ? ` ("${cutText(title, MAX_TITLE_CHARS)}")` : ""}`;
  }
  return cutText(message, MAX_MODEL_MESSAGE_CHARS);
}

/**
 * The task's error message for a failed model request. `scrub` (the vault's values) runs on the
 * whole message first: cut afterwards, a secret cannot be left half there, unrecognised.
 */
export function modelFailureMessage(e: ModelError, quiet: boolean, scrub: (text: string) => string): string {
  return quiet ? quietModelMessage(e.status, e.type) : readableModelMessage(scrub(e.message), e.status);
}
