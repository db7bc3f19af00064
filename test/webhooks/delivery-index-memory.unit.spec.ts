// The delivery-history index in memory (API servers of the distributed mode, rebuilt from the log at start).
import { createMemoryDeliveryIndex } from '../../projections/deliveries-index-memory.js';
import { deliveryIndexContract } from './delivery-index.contract.js';

deliveryIndexContract('memory', async () => ({ index: createMemoryDeliveryIndex(), reopen: null, teardown: async () => undefined }));
