/**
 * Markdown cut into blocks of a few KB, so a long answer renders incrementally: while text streams
 * in, the blocks before the last one never change (each is rendered once), and only the last,
 * open block is rendered again per frame — the cost of a frame stays that of a few KB of markdown
 * however long the answer grows. A block is cut once it holds at least `minBlock` characters, at a
 * blank line outside a code fence whose next line starts a new construct at the left margin — not
 * an indented continuation and not another list item, so loose lists, list paragraphs and
 * indented code stay whole. An answer shorter than `minBlock` is one block, rendered as a whole.
 * (Reference-style link definitions do not reach across blocks: model answers use inline links.)
 */

const FENCE_OPEN = /^ {0,3}(`{3,}|~{3,})/;
const LIST_ITEM = /^([*+-]|\d{1,9}[.)])(\s|$)/;

export class BlockSplitter {
  private text = "";
  /** Completed blocks: their text no longer changes while the text only grows. */
  private done: string[] = [];
  /** Where the open (last) block starts. */
  private tail = 0;
  /** The start of the first line not examined yet, and the state there. */
  private pos = 0;
  private fence: string | null = null;
  private prevBlank = false;

  constructor(private minBlock = 8192) {}

  /** The blocks of `text`; when it only grew since the last call, only its new lines are examined. */
  split(text: string): string[] {
    if (text.length < this.text.length || !text.startsWith(this.text)) this.reset();
    this.text = text;
    for (let nl = text.indexOf("\n", this.pos); nl !== -1; nl = text.indexOf("\n", this.pos)) {
      this.line(text.slice(this.pos, nl), this.pos);
      this.pos = nl + 1;
    }
    const open = text.slice(this.tail);
    return open ? [...this.done, open] : this.done.slice();
  }

  private reset() {
    this.text = "";
    this.done = [];
    this.tail = 0;
    this.pos = 0;
    this.fence = null;
    this.prevBlank = false;
  }

  /** Examines one complete line starting at `start`. */
  private line(line: string, start: number) {
    if (this.fence !== null) {
      const close = FENCE_OPEN.exec(line);
      if (close && close[1]![0] === this.fence[0] && close[1]!.length >= this.fence.length && line.trim() === close[1]) this.fence = null;
      this.prevBlank = false;
      return;
    }
    const blank = line.trim() === "";
    if (!blank && this.prevBlank && start - this.tail >= this.minBlock && /^\S/.test(line) && !LIST_ITEM.test(line)) {
      this.done.push(this.text.slice(this.tail, start));
      this.tail = start;
    }
    const open = FENCE_OPEN.exec(line);
    if (open) this.fence = open[1]!;
    this.prevBlank = blank;
  }
}
