/**
 * The public surface of `audio-proxy`: re-exports only (see docs/embedding.md).
 *
 * - `createAudioProxy`: the whole proxy as a `(req, res)` handler plus lifecycle methods.
 * - The config loader and providers (`loadConfig`, `staticConfig`, `mutableConfig`).
 * - The state charts, for use on their own or for inspection.
 * - The actor runtime (`call`, `cast`, `inbox`, `watch`, `Registry`, `createSystem`).
 * - The clients of three charts, as namespaces: `semaphoreClient`, `waitingRoomClient`,
 *   `supervisorClient`.
 */

export * from './actors/index.js';
export { createCapacityRegistry } from './cluster/capacityRegistry.js';
export { createMembership } from './cluster/membership.js';
export {
  type CapacityRegistry,
  type CapacityRegistryOptions,
  type Membership,
  type MembershipOptions,
  type NodeInfo,
  type NodeState,
  RegistryError,
  type Reservation,
  type SelectOptions,
} from './cluster/types.js';
export {
  CONFIG_VARIABLES,
  type Config,
  ConfigError,
  type ConfigProvider,
  configOrExit,
  configWarnings,
  type LoadConfigOptions,
  loadConfig,
  type MutableConfigProvider,
  mutableConfig,
  staticConfig,
} from './config/index.js';
export type { Failure } from './core/failure.js';
export { toRawPath } from './core/rawPath.js';
export { DEMO_TRACKS, demoRoot, demoUrls, ensureDemoLibrary } from './demo.js';
export { ERROR_TABLE, type ErrorRow, errorResponse } from './http/errors.js';
export { INSECURE_SIGNATURE, sign } from './http/signature.js';
export {
  InspectError,
  type InspectOption,
  type InspectorRelay,
  startInspectorRelay,
} from './inspect.js';
export {
  type DeliveryEvent,
  type DeliveryInput,
  deliveryMachine,
} from './machines/delivery.js';
export {
  type ProbeCoordinatorEvent,
  type ProbeCoordinatorInput,
  probeCoordinatorMachine,
} from './machines/probeCoordinator.js';
export {
  type ProbeLimiterEvent,
  type ProbeLimiterInput,
  type ProbeSlotOutcome,
  probeLimiterMachine,
} from './machines/probeLimiter.js';
export {
  type Process,
  type ProcessSupervisorEvent,
  type ProcessSupervisorInput,
  processSupervisorMachine,
  type SupervisorStats,
} from './machines/processSupervisor.js';
export { type ReadinessReply, readinessMachine } from './machines/readiness.js';
export {
  type RegistryErrorCode,
  type RegistryLinkContext,
  type RegistryLinkEvent,
  type RegistryStats,
  registryLinkMachine,
} from './machines/registryLink.js';
export { type RenderEvent, type RenderInput, renderMachine } from './machines/render.js';
export {
  type RenderCoordinatorEvent,
  type RenderCoordinatorInput,
  renderCoordinatorMachine,
  type SubscriberMessage,
} from './machines/renderCoordinator.js';
export {
  ADMISSION_CLASSES,
  type AdmissionClass,
  type RequestOutcome,
  type SemaphoreEvent,
  type SemaphoreInput,
  type SemaphoreLimits,
  type SemaphoreStats,
  type SemaphoreTelemetry,
  semaphoreMachine,
  type WaiterMessage,
} from './machines/semaphore.js';
export {
  type TeeEvent,
  type TeeInput,
  type TeeOutcome,
  teeMachine,
} from './machines/tee.js';
export { type WaitingRoomEvent, waitingRoomMachine } from './machines/waitingRoom.js';
export {
  ADMISSION_QUEUE_EVENTS,
  type TicketView,
  type WaitingRoomInput,
  type WaitingRoomMessage,
  type WaitingRoomTelemetry,
} from './machines/waitingRoomSlots.js';
export {
  type AudioProxy,
  type AudioProxyOptions,
  CLOSE_DRAIN_MS,
  createAudioProxy,
  ListenError,
  type ProxyFatal,
  VERSION,
} from './proxy.js';
export { renderLogic } from './services/renderLogic.js';
export * as semaphoreClient from './services/semaphoreClient.js';
export * as supervisorClient from './services/supervisorClient.js';
export * as waitingRoomClient from './services/waitingRoomClient.js';
export { CHANNELS, type ChannelName } from './telemetry/channels.js';
export {
  type CapabilityReading,
  type Component,
  EncoderCapabilities,
  type Refusal,
  readCapabilities,
} from './workers/capabilities.js';
export { resolveFfmpeg, resolveFfprobe } from './workers/ffmpegPath.js';
