// Entry point: parse configuration, start the service, stop gracefully on SIGINT/SIGTERM.
import { ConfigError, loadConfig } from './config/config.js';
import { LogUnavailable } from './log/event-log.js';
import { startService } from './service.js';

const main = async () => {
  const config = loadConfig();
  // Only the embedded role creates a first workspace: several API servers must not each make one.
  const service = await startService(config, { bootstrapWorkspace: config.role === 'all' });
  if (service.firstApiKey !== null) {
    console.log(`Created the first workspace ${service.firstApiKey.workspaceId}.`);
    console.log(`Its API key (shown once, keep it): ${service.firstApiKey.apiKey}`);
  }
  console.log(`support-platform (${config.role}) listening on ${service.url} with data in ${config.dataDir}`);
  const stop = (signal: string) => {
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
};

main().catch((error: unknown) => {
  if (error instanceof ConfigError || error instanceof LogUnavailable) {
    console.error(`cannot start: ${error.message}`);
  } else {
    console.error('cannot start:', error);
  }
  process.exit(1);
});
