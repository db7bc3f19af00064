// The thread of src/shared/thread-launcher.ts: starts worker threads on its parent's behalf and
// relays everything between them. A new thread inherits the nice value of the thread that creates it,
// so threads started from here keep the priority this one was started with, whatever the parent
// thread has lowered its own to since. Plain JavaScript, so it starts without tsx.
import { writeFileSync } from 'node:fs';
import { parentPort, Worker } from 'node:worker_threads';

// Named as thread-priority.ts names the others (that module is TypeScript); elsewhere than Linux, unnamed.
try {
  writeFileSync('/proc/thread-self/comm', 'thread-launcher');
} catch {}

const workers = new Map();
const relay = (id, kind, fields) => parentPort.postMessage({ id, kind, ...fields });
// What a worker threw, as its owner rebuilds it: the Error a worker's 'error' event hands over does
// not clone again (its own Symbol.toStringTag makes it a plain, empty object on the way).
const described = (error) =>
  error instanceof Error ? { name: error.name, message: error.message, stack: error.stack } : { name: 'Error', message: String(error) };

parentPort.on('message', (message) => {
  switch (message.kind) {
    case 'start': {
      const { id } = message;
      let worker;
      try {
        worker = new Worker(new URL(message.url), message.options);
      } catch (error) {
        relay(id, 'error', { error: described(error) });
        return relay(id, 'exit', { code: 1 });
      }
      workers.set(id, worker);
      relay(id, 'started', { threadId: worker.threadId });
      worker.on('message', (payload) => relay(id, 'message', { payload }));
      worker.on('error', (error) => relay(id, 'error', { error: described(error) }));
      worker.on('exit', (code) => {
        workers.delete(id);
        relay(id, 'exit', { code });
      });
      return;
    }
    case 'post':
      return workers.get(message.id)?.postMessage(message.payload);
    case 'terminate':
      return void workers.get(message.id)?.terminate();
  }
});
