/**
 * What a model request has used so far, while its answer streams: a cancelled, interrupted or
 * failed request is charged this (the provider bills what it processed and sent, finished or not).
 * Input tokens are what the provider reported (Anthropic: message_start, and the total again when
 * message_delta restates a part of it — anthropic.ts merges the parts; OpenAI: only the usage
 * chunk at the very end — a stream cut before it is charged an estimate of its input, one token
 * per CHARS_PER_TOKEN characters of the request's JSON, made only then: `estimateInput`). Output
 * tokens are the provider's figure once it sent its final one (Anthropic's message_delta, OpenAI's
 * usage chunk); before that, at least one token per CHARS_PER_TOKEN characters of text and tool-call
 * arguments received — a deliberate overestimate (English prose averages about 4 characters a
 * token, code about 3), so that cutting a stream short never costs less than letting it finish.
 */
/** Tokens of one model request (also ModelResponse's `usage`). */
export interface Usage {
  input_tokens: number;
  output_tokens: number;
}

export const CHARS_PER_TOKEN = 3;

export class UsageMeter {
  private input = 0;
  private output = 0;
  private final = false;
  private chars = 0;
  private inputReported = false;
  private inputEstimate: (() => number) | null = null;

  /** `onInput`: the input tokens just became known (the caller may store them at once). */
  constructor(private readonly onInput?: () => void) {}

  /**
   * A new attempt (a retry) starts: its own figures replace the failed one's. A retry only follows
   * an attempt that sent nothing on, so what streamed is the last attempt's.
   */
  begin() {
    this.output = 0;
    this.final = false;
    this.chars = 0;
    this.inputEstimate = null;
  }

  /**
   * The server took the request and answers, but reports its input only at the end (OpenAI): a
   * stream cut before that is charged `estimate()` input tokens (called only then).
   */
  estimateInput(estimate: () => number) {
    this.inputEstimate = estimate;
  }

  /** The provider's figures (cumulative within the attempt); `final`: the output count is complete. */
  reported(input: number | null | undefined, output: number | null | undefined, final = false) {
    if (output != null) this.output = output;
    if (final) this.final = true;
    if (input != null) this.inputReported = true;
    if (input != null && input !== this.input) {
      this.input = input;
      this.onInput?.();
    }
  }

  /** Characters of text or tool-call arguments received (counted toward the output estimate). */
  received(chars: number) {
    this.chars += chars;
  }

  /** The usage so far (see the file's comment). */
  used(): Usage {
    const output = this.final ? this.output : Math.max(this.output, Math.ceil(this.chars / CHARS_PER_TOKEN));
    const input = !this.inputReported && this.inputEstimate ? Math.max(this.input, this.inputEstimate()) : this.input;
    return { input_tokens: input, output_tokens: output };
  }
}
