/**
 * An OpenAI-style server for a local GGUF model on node-llama-cpp (`/v1/models`,
 * `/v1/chat/completions`, `/health`) on plain HTTP and mutual TLS, that cannot hang; with a
 * model generator, certificates and a model-integrity manifest.
 */
export { AccessLog } from './access-log.js';
export { canonicalOrigin } from './browser.js';
export { CERT_FILES, type CertsOptions, type CertsResult, generateCerts } from './certs.js';
export {
  DEFAULTS,
  defaultModelId,
  defaultThreads,
  GPU_CHOICES,
  type GpuChoice,
  physicalCores,
  resolveConfig,
  type ServerConfig,
  type ServerOptions,
  serverOptionsFromFlags,
} from './config.js';
export {
  type CompletionInput,
  type CompletionMessage,
  type CompletionOutput,
  type CompletionSettings,
  Engine,
  type EngineOptions,
} from './engine.js';
export {
  ApiError,
  ConfigError,
  ContextLengthError,
  EndReason,
  exitCodeFor,
  GgufError,
  ListenError,
  ManifestError,
  ModelLoadError,
  QueueFullError,
  StartupError,
} from './errors.js';
export {
  buildVocabulary,
  checkModelSummary,
  type GgufSummary,
  type MakeModelOptions,
  type MakeModelResult,
  type ModelShape,
  makeModel,
  PRESET_NAMES,
  PRESETS,
  type PresetName,
  parameterCount,
  readGgufSummary,
  WEIGHT_TYPES,
  type WeightType,
} from './gguf/index.js';
export { createLogger, type Logger, type LogLevel, memoryLogger } from './logger.js';
export {
  createManifest,
  digestFile,
  generateSigningKey,
  type Manifest,
  type ManifestEntry,
  verifyManifest,
  writeManifest,
} from './manifest.js';
export {
  type ChatCompletionChunk,
  type CompletionRequest,
  modelList,
  parseCompletionRequest,
} from './openai.js';
export { INFERENCE_SERVE_OPTIONS, type ServeFlags } from './options.js';
export { EWMA_WEIGHT, retryAfterEstimate, Scheduler } from './scheduler.js';
export { type ServerHandle, type ServerState, start } from './server.js';
export {
  chooseSlot,
  chooseWaiter,
  commonPrefix,
  isPrefixHit,
  MAX_PASSED_OVER,
  MIN_PREFIX_SHARE,
  type SlotView,
  type WaiterView,
} from './slots.js';
export { type RefusalLog, refusalLog, refusalReason } from './tls-refusals.js';
export { VERSION } from './version.js';
export { listThreads, type ThreadInfo } from './worker-priority.js';
