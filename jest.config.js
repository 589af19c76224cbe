/**
 * One jest run for the whole workspace. Tests are TypeScript ESM, transpiled by ts-jest without
 * type information (isolatedModules); `pnpm typecheck` type-checks them with tsc.
 * Workspace packages resolve to their sources, so tests never depend on a stale build; tests that
 * start real processes run the built binaries (`pnpm test` builds first).
 */
/** @type {import('jest').Config} */
export default {
  testEnvironment: 'node',
  roots: ['<rootDir>/packages', '<rootDir>/test'],
  testMatch: ['**/test/**/*.test.ts'],
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: {
    '^@vigil/shared-types/node$': '<rootDir>/packages/shared-types/src/node/index.ts',
    '^@vigil/shared-types/light$': '<rootDir>/packages/shared-types/src/node/light.ts',
    '^@vigil/([a-z-]+)$': '<rootDir>/packages/$1/src/index.ts',
    '^@vigil/([a-z-]+)/options$': '<rootDir>/packages/$1/src/options.ts',
    '^(\\.{1,2}/.*)\\.js$': '$1',
  },
  transform: {
    '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: '<rootDir>/tsconfig.test.json' }],
  },
  testTimeout: 20000,
  // Two cores: one worker per core keeps process-heavy tests from starving each other.
  maxWorkers: 2,
};
