// Entry point: parse configuration, start the service, stop gracefully on SIGINT/SIGTERM.
import { KafkaUnavailable } from './bus/kafka.js';
import { ConfigError, loadConfig } from './config/config.js';
import { LogUnavailable } from './log/event-log.js';
import { ReadModelsUnavailable } from '../projections/tickets-store-sqlite.js';
import { startService, type Service } from './service.js';
import { lowerThreadPriority } from './shared/thread-priority.js';

const main = async () => {
  const config = loadConfig();
  let service: Service | undefined;
  // Listening from the first moment: a signal during start-up (a long catch-up) ends the process at
  // once, as every write of the log is already durable; after it, the service drains and closes.
  const stop = (signal: string) => {
    if (service === undefined) {
      console.log(`${signal} during start-up: exiting`);
      process.exit(0);
    }
    console.log(`${signal}: shutting down`);
    service.close().then(
      () => process.exit(0),
      (error: unknown) => {
        console.error('shutdown failed:', error);
        process.exit(1);
      },
    );
  };
  process.once('SIGINT', () => stop('SIGINT'));
  process.once('SIGTERM', () => stop('SIGTERM'));
  // Only the embedded role creates a first workspace: several API servers must not each make one.
  service = await startService(config, { bootstrapWorkspace: config.role === 'all' });
  // The requests yield to delivery when the cores are short (on a machine with cores to spare nothing
  // changes): a write that outruns delivery only grows the backlog. In the embedded role delivery is
  // this process's own thread; an API server yields to dispatchers on its host. Lowered only now,
  // after every thread that must keep the process's priority has started (a delivery thread started
  // again later comes from the launcher it was started from, at that priority).
  if ((config.role === 'all' || config.role === 'api') && config.apiThreadNice > 0) lowerThreadPriority(config.apiThreadNice);
  if (service.firstApiKey !== null) {
    console.log(`Created the first workspace ${service.firstApiKey.workspaceId}.`);
    console.log(`Its API key (shown once, keep it): ${service.firstApiKey.apiKey}`);
    // The way back, where a new user looks first (README "A lost API key").
    console.log(`A lost key cannot be shown again: with ADMIN_TOKEN set, POST /admin/v1/workspaces/${service.firstApiKey.workspaceId}/keys issues another.`);
  }
  console.log(`support-platform (${config.role}) listening on ${service.url} with data in ${config.dataDir}`);
};

main().catch((error: unknown) => {
  if (error instanceof ConfigError || error instanceof LogUnavailable || error instanceof ReadModelsUnavailable || error instanceof KafkaUnavailable) {
    console.error(`cannot start: ${error.message}`);
  } else {
    console.error('cannot start:', error);
  }
  process.exit(1);
});
