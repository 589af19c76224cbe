/** @vigil/stack: the whole stack on one host. */
export { VERSION } from './version.js';
