// Server-sent events framing, as vLLM streams completions: `data: <payload>` lines, a blank line ending each event.
// The network cuts the stream anywhere, so text is buffered until an event's blank line arrives, and one read may
// carry several events.

/** The most one event may hold, in UTF-16 code units (a completion chunk is a few hundred). */
export const MAX_EVENT_BYTES = 1024 * 1024;

/** Turns streamed text into the `data` payloads of the events it completes, in order. */
export class SseDecoder {
  private pending = '';
  private data: string[] = [];

  /**
   * Feeds the next piece of text (already UTF-8 decoded); returns the payloads of the events it completed, or undefined
   * when the event being read has grown past MAX_EVENT_BYTES (the stream is not one to read on).
   */
  push(text: string): string[] | undefined {
    this.pending += text;
    const payloads: string[] = [];
    let newline = this.pending.indexOf('\n');
    while (newline >= 0) {
      const payload = this.line(this.pending.slice(0, newline).replace(/\r$/, ''));
      if (payload !== undefined) payloads.push(payload);
      this.pending = this.pending.slice(newline + 1);
      newline = this.pending.indexOf('\n');
    }
    // What the event being read holds so far: its data lines and a line not yet ended.
    const held = this.data.reduce((n, line) => n + line.length, this.pending.length);
    return held > MAX_EVENT_BYTES ? undefined : payloads;
  }

  /** One complete line: a blank one dispatches the event (its data lines joined by newlines, per the SSE spec). */
  private line(line: string): string | undefined {
    if (line === '') {
      if (this.data.length === 0) return undefined;
      const payload = this.data.join('\n');
      this.data = [];
      return payload;
    }
    // Comments (`: keep-alive`) and the other fields (event, id, retry) carry nothing a completion needs.
    if (line.startsWith('data:')) this.data.push(line.slice('data:'.length).replace(/^ /, ''));
    return undefined;
  }
}
