// src/index.ts is the package's public surface and only re-exports: every statement in it is an
// `export … from`, so nothing can run on import and no logic hides in the entry point. The names
// that docs/embedding.md and examples/ use are all there: the proxy, the config loader, the
// ten charts, the actor runtime and the three client namespaces.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import * as surface from '../src/index.js';

describe('src/index.ts', () => {
  it('contains re-exports and comments only', () => {
    const source = readFileSync(join(process.cwd(), 'src/index.ts'), 'utf8')
      .replace(/\/\*[\s\S]*?\*\//g, '')
      .replace(/\/\/.*$/gm, '');
    const statements = source
      .split(';')
      .map((s) => s.trim())
      .filter(Boolean);
    expect(statements.length).toBeGreaterThan(10);
    for (const s of statements)
      expect(s).toMatch(/^export (type )?(\*|\* as \w+|\{[^}]*\}) from '[^']+'$/);
  });

  it('exports what an embedder needs', () => {
    for (const name of [
      'createAudioProxy',
      'loadConfig',
      'staticConfig',
      'mutableConfig',
      'semaphoreMachine',
      'probeLimiterMachine',
      'readinessMachine',
      'renderMachine',
      'renderCoordinatorMachine',
      'probeCoordinatorMachine',
      'processSupervisorMachine',
      'waitingRoomMachine',
      'teeMachine',
      'registryLinkMachine',
      'deliveryMachine',
      'renderLogic',
      'createCapacityRegistry',
      'createMembership',
      'startInspectorRelay',
      'call',
      'cast',
      'inbox',
      'reply',
      'watch',
      'watchInto',
      'Registry',
      'createSystem',
      'ListenError',
      'CLOSE_DRAIN_MS',
      'CallError',
      'sign',
      'CHANNELS',
    ]) {
      expect(surface, name).toHaveProperty(name);
    }
    expect(typeof surface.semaphoreClient.acquire).toBe('function');
    expect(typeof surface.waitingRoomClient.withAdmission).toBe('function');
    expect(typeof surface.supervisorClient.runSupervised).toBe('function');
  });
});
