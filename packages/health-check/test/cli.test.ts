import { fileURLToPath } from 'node:url';
import { describeCommandLine } from '../../../test/cli-contract.js';

describeCommandLine(fileURLToPath(new URL('..', import.meta.url)), 'health-check', [], 3);
