// Another team's workflow, in their own bundle on their own task queue: serve a checkpoint with Ferry as a child
// workflow on Ferry's task queue, wait until it is Ready, then delete it by cancelling the child (its teardown runs
// before the cancellation completes). Imports only the package's workflow-safe entry point.
import {
  CancellationScope,
  ChildWorkflowCancellationType,
  ParentClosePolicy,
  condition,
  setHandler,
  startChild,
} from '@temporalio/workflow';
import {
  modelRefOf,
  parseServedModel,
  phaseChangedSignal,
  taskQueueFor,
  workflowIdFor,
} from '@ferry-dev/ferry/workflow';

export async function serveThenDelete(doc) {
  const spec = parseServedModel(doc);
  let latest;
  setHandler(phaseChangedSignal, (change) => void (latest = change));
  const serving = new CancellationScope();
  const served = serving.run(async () => {
    const child = await startChild('ServeModelWorkflow', {
      args: [{ version: 1, spec }],
      taskQueue: taskQueueFor(spec.spec.cluster),
      workflowId: workflowIdFor(modelRefOf(spec)),
      parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
      cancellationType: ChildWorkflowCancellationType.WAIT_CANCELLATION_COMPLETED,
    });
    return child.result();
  });
  served.catch(() => undefined);
  try {
    await condition(() => latest?.phase === 'Ready' || latest?.phase === 'Failed');
    return { phase: latest.phase, endpoint: latest.endpoint };
  } finally {
    serving.cancel();
    await CancellationScope.nonCancellable(() => served.catch(() => undefined));
  }
}
