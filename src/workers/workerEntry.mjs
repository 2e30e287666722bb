// Piscina worker entry for TypeScript task modules (used only when running from source).
//
// Node 20 cannot load `.ts` by itself, and a worker does not reliably inherit a loader: under
// plain `node` and inside vitest, importing a `.ts` task fails with ERR_UNKNOWN_FILE_EXTENSION.
// Registering tsx's ESM hooks here, then importing the task module, works under plain node, under
// `tsx` (registering twice is harmless) and under vitest. The compiled build points Piscina at
// the `.js` task module directly and never loads this file.
//
// Keep this file free of anything that can throw at top level: a throwing worker module makes
// Piscina's *next* run hang forever (the first one rejects and the pool emits 'error').
import { workerData } from 'node:worker_threads';
import { register } from 'tsx/esm/api';

register();
const taskModule = await import(workerData.taskModule);

export default taskModule.default;
