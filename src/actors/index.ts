/** The actor runtime: messaging, monitors, the unique registry and the system. Re-exports only. */
export * from '../core/protocol.js';
export * from './call.js';
export * from './monitor.js';
export * from './registry.js';
export * from './system.js';
