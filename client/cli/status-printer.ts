// Live progress of a model on a stream: permanent lines for what changed; on a terminal, a download bar that
// redraws in place below them.
import type { ModelStatus } from '../../workflows/contract/index.js';
import { changeLine, downloadBar } from './format.js';
import { CLEAR_LINE, type Output } from './io.js';

export class StatusPrinter {
  private previous: ModelStatus | undefined;
  private barShown = false;

  constructor(
    private readonly out: Output,
    private readonly now: () => Date,
    /** Ready replicas in the phase lines, and a line when they change (`status -w`). */
    private readonly options: { replicas?: boolean } = {},
  ) {}

  /** Takes `status` as what was last shown, printing nothing: later updates print what changed since. */
  shown(status: ModelStatus): void {
    this.previous = status;
  }

  update(status: ModelStatus): void {
    const tty = this.out.isTTY === true;
    const line = changeLine(this.previous, status, { download: !tty, ...this.options });
    this.previous = status;
    if (line) {
      this.clearBar();
      const time = this.now().toTimeString().slice(0, 8);
      this.out.write(
        `${line
          .split('\n')
          .map((l) => `${time}  ${l}`)
          .join('\n')}\n`,
      );
    }
    if (tty) {
      const bar = downloadBar(status);
      if (bar) {
        this.out.write(`${CLEAR_LINE}${bar}`);
        this.barShown = true;
      } else {
        this.clearBar();
      }
    }
  }

  /** Leaves the stream at the start of a clean line. */
  finish(): void {
    this.clearBar();
  }

  private clearBar(): void {
    if (!this.barShown) return;
    this.out.write(CLEAR_LINE);
    this.barShown = false;
  }
}
