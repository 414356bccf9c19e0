// Server-sent events framing, as vLLM streams completions: `data: <payload>` lines, a blank line ending each event.
// The network cuts the stream anywhere, so text is buffered until an event's blank line arrives, and one read may
// carry several events.

/** Turns streamed text into the `data` payloads of the events it completes, in order. */
export class SseDecoder {
  private pending = '';
  private data: string[] = [];

  /** Feeds the next piece of text (already UTF-8 decoded); returns the payloads of the events it completed. */
  push(text: string): string[] {
    this.pending += text;
    const payloads: string[] = [];
    let newline = this.pending.indexOf('\n');
    while (newline >= 0) {
      const payload = this.line(this.pending.slice(0, newline).replace(/\r$/, ''));
      if (payload !== undefined) payloads.push(payload);
      this.pending = this.pending.slice(newline + 1);
      newline = this.pending.indexOf('\n');
    }
    return payloads;
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
