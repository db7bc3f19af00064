import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { expect } from 'chai';
import { rebuildProjections } from '../../scripts/rebuild.js';
import { openExistingLog } from '../../scripts/export.js';
import { TICKET_OPENED } from '../../src/domain/ticket/state.js';
import { randomId } from '../../src/shared/ids.js';
import { startTestService } from '../support/server.js';
import { appendEvents } from '../support/updates-events.js';

describe('scripts/rebuild.ts (int)', () => {
  it('rebuilds every read model from the stopped service\'s log', async () => {
    const svc = await startTestService({}, { dataDir: mkdtempSync(path.join(tmpdir(), 'sp-rebuild-')) });
    const ws = await svc.createWorkspace();
    await svc.createWorkspace();
    const ticketId = randomId();
    const at = new Date().toISOString();
    await appendEvents(svc.service.core.log, ws.workspaceId, [
      { type: TICKET_OPENED, data: { ticket_id: ticketId, workspace_id: ws.workspaceId, contact_id: 'c1', subject: 'Hi', status: 'new', priority: 'normal', created_at: at } },
      {
        type: 'message.created',
        data: { id: 'm1', message_id: 'm1', ticket_id: ticketId, sender_type: 'contact', sender_id: null, sender_name: null, content: 'Hello', is_internal: false, media: [], created_at: at },
      },
    ]);
    await svc.service.close();
    const log = openExistingLog(svc.dataDir);
    try {
      const report = await rebuildProjections(log);
      expect(report.documents).to.include({ 'workspace-directory': 2, tickets: 1 });
      expect(Object.keys(report.documents)).to.include.members(['contacts', 'tickets']);
      expect(report.events).to.be.greaterThan(2);
    } finally {
      await log.close();
      await svc.close();
      rmSync(svc.dataDir, { recursive: true, force: true });
    }
  });
});
