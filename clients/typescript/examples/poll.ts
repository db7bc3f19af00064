// Poll your first update: prints every event of the workspace from the start of its history, then
// waits for new ones (Ctrl-C to stop).
//   API_URL=http://localhost:8080 API_KEY=sk_… npx tsx poll.ts
import { isEvent, updates } from '@support-platform/client';

const poll = updates({ url: process.env['API_URL'] ?? 'http://localhost:8080', apiKey: process.env['API_KEY'] ?? '', offset: 0 });
for await (const event of poll) {
  if (isEvent(event, 'message.created')) console.log(`  ${event.data.sender_type} wrote: ${event.data.content}`);
  console.log(`${event.offset} ${event.type} ${event.id}`);
  // poll.offset is where to resume: store it to carry on after a restart.
}
