/**
 * The render chart brought to life: `machines/render.ts` names its worker actor as a contract
 * only, and this is where the real one (a task in the Piscina pool, `workers/renderClient.ts`)
 * is provided. Every live Render (the coordinator invokes it) runs this logic; tests that want
 * a fake encoder provide their own instead.
 */
import { renderMachine } from '../machines/render.js';
import { renderWorkerActor } from '../workers/renderClient.js';

/** The Render chart with the real worker actor. */
export const renderLogic = renderMachine.provide({ actors: { renderWorker: renderWorkerActor } });
