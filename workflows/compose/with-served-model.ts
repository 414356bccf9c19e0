// A model that exists exactly as long as a piece of the calling workflow: served, Ready, used, deleted.
import { serveAsChild, type ReadyModel, type ServeAsChildOptions } from './serve-as-child.js';

/**
 * Serves `document` as a child, waits until it is Ready, runs `body` with its endpoint, and deletes the model when
 * `body` returns, when it throws, and when the calling workflow is cancelled (the deletion waits in a
 * non-cancellable scope). If the calling workflow dies without running this cleanup (terminated, timed out), the
 * child's parent-close policy cancels the model's workflow, which tears it down.
 */
export async function withServedModel<T>(
  document: unknown,
  body: (model: ReadyModel) => Promise<T>,
  options: ServeAsChildOptions = {},
): Promise<T> {
  const child = await serveAsChild(document, options);
  try {
    return await body(await child.ready());
  } finally {
    await child.delete();
  }
}
