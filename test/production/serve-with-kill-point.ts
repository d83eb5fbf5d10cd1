/**
 * `store-api serve` that SIGKILLs itself at one step of an admin write (the step named by
 * KILL_AT_ADMIN_WRITE_STEP: claimed, handled, audited, answer_stored, committed; see
 * src/admin/admin-write-transaction.ts), for test/production/exactly-once-writes.test.ts. Without the
 * variable it is the plain CLI. Run with `node --import tsx <this file> serve`.
 */
import { setAdminWriteStepHook, type AdminWriteStep } from '../../src/admin/admin-write-transaction.ts';

const killAt = process.env.KILL_AT_ADMIN_WRITE_STEP as AdminWriteStep | undefined;
if (killAt) {
  setAdminWriteStepHook((step) => {
    if (step !== killAt) return;
    process.stdout.write(`killing myself at ${step}\n`);
    process.kill(process.pid, 'SIGKILL');
  });
}
await import('../../src/main/cli.ts');
