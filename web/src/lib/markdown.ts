/**
 * Model output as markdown: `marked` (GitHub-flavoured: tables, lists, code) with raw HTML
 * escaped, then DOMPurify as the second guard — model text can never become markup or script.
 * Links open in a new tab without an opener; images render only from this origin (signed
 * workspace files) or data: URLs, anything else becomes a link, so an image URL cannot carry data
 * out; in text streamed before the turn's result, a relative image is its alt text until the
 * result brings its signed URL. Code blocks get a copy button (wired by the transcript with one delegated listener).
 * (markdown-it was the first choice; it alone is 47 KB gzipped, half the dashboard's budget.)
 */
import DOMPurify from "dompurify";
import { Marked, type Tokens } from "marked";

const escape = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

const sameOrigin = (src: string) => {
  if (/^data:image\/(png|jpe?g|gif|webp);/i.test(src)) return true;
  try {
    return new URL(src, location.href).origin === location.origin;
  } catch {
    return false;
  }
};

/** A relative URL (no scheme, no leading /): in streamed text it would resolve against the page's path. */
const relative = (src: string) => !/^[a-z][a-z0-9+.-]*:/i.test(src) && !src.startsWith("/");

/** Set while a streamed text is parsed (marked renders synchronously). */
let streamed = false;

const marked = new Marked({
  gfm: true,
  breaks: false,
  renderer: {
    html({ text }: Tokens.HTML | Tokens.Tag) {
      return escape(text);
    },
    link({ href, title, tokens }: Tokens.Link) {
      const inner = this.parser.parseInline(tokens);
      return `<a href="${escape(href)}"${title ? ` title="${escape(title)}"` : ""} target="_blank" rel="noopener noreferrer">${inner}</a>`;
    },
    image({ href, title, text }: Tokens.Image) {
      // The agent's relative image paths are workspace files: turn.done's result_text has them as
      // signed URLs. Until then the picture is its alt text (fetched, it would be /sessions/<path>).
      if (streamed && relative(href)) return `<span class="pending-image">${escape(text || "image")}</span>`;
      if (sameOrigin(href)) return `<img src="${escape(href)}" alt="${escape(text)}"${title ? ` title="${escape(title)}"` : ""} loading="lazy">`;
      return `<a href="${escape(href)}" target="_blank" rel="noopener noreferrer" class="external-image">${escape(text || "image")} (external image, not loaded)</a>`;
    },
    code({ text, lang }: Tokens.Code) {
      const l = (lang ?? "").trim().split(/\s+/)[0] ?? "";
      return `<div class="code"><button type="button" class="copy" data-copy>Copy</button><pre><code${l ? ` class="language-${escape(l)}"` : ""}>${escape(text)}</code></pre></div>`;
    },
  },
});

/** Sanitised HTML for a markdown string; `opts.streamed`: text streamed before the turn's result (relative images are not loaded). */
export function renderMarkdown(text: string, opts: { streamed?: boolean } = {}): string {
  streamed = opts.streamed === true;
  let html: string;
  try {
    html = marked.parse(text, { async: false }) as string;
  } finally {
    streamed = false;
  }
  return DOMPurify.sanitize(html, { ADD_ATTR: ["target"], FORBID_TAGS: ["style", "form", "input", "textarea", "select", "iframe"] });
}
