// The relay checkpoint's generations against a real SQLite log (temp file): positions, the bounded
// number of events kept, fencing, a crash between a generation's naming and its first write, and the
// single stream of earlier versions.
import { expect } from 'chai';
import {
  createLogCheckpoint,
  generationStream,
  RELAY_CHECKPOINT_EVENT,
  RELAY_CHECKPOINT_GENERATION_EVENT,
  RELAY_CHECKPOINT_GENERATIONS_STREAM,
  RELAY_CHECKPOINT_STREAM,
  RelayFenced,
  type RelayCheckpoint,
} from '../../src/bus/checkpoint.js';
import type { NewEvent } from '../../src/log/event-log.js';
import { randomId } from '../../src/shared/ids.js';
import { openTempLog, type TempLog } from '../support/bus-kafka.js';

const checkpointed = (position: number): NewEvent => ({ id: randomId(), type: RELAY_CHECKPOINT_EVENT, workspaceId: '', data: { position } });
const generationStarted = (generation: number): NewEvent => ({ id: randomId(), type: RELAY_CHECKPOINT_GENERATION_EVENT, workspaceId: '', data: { generation } });

const fencedOn = async (write: Promise<void>): Promise<unknown> => write.then(() => null, (error: unknown) => error);

describe('bus relay checkpoint (real SQLite log)', () => {
  let temp: TempLog;
  const checkpoint = (generationSize = 3): RelayCheckpoint => createLogCheckpoint(temp.log, randomId, { generationSize });
  /** Every checkpoint event left in the log, whatever its stream. */
  const kept = () => temp.log.readAll({ after: 0, types: [RELAY_CHECKPOINT_EVENT] });
  const generations = () => temp.log.readStream(RELAY_CHECKPOINT_GENERATIONS_STREAM);

  beforeEach(() => {
    temp = openTempLog();
  });
  afterEach(() => temp.close());

  it('reads back the last position across rotations, keeping at most one generation of events', async () => {
    const writer = checkpoint(4);
    expect(await writer.read()).to.equal(0);
    for (let position = 1; position <= 30; position++) {
      await writer.write(position * 10);
      expect(await checkpoint(4).read()).to.equal(position * 10);
      const events = await kept();
      expect(events.length, `events after write ${position}`).to.be.within(1, 4);
      expect(new Set(events.map((e) => e.stream)).size).to.equal(1);
    }
    const named = await generations();
    expect(named.length).to.be.at.least(5);
    expect((await kept())[0]?.stream).to.equal(generationStream(named.length));
  });

  it('fences a relay that read before another one wrote', async () => {
    const one = checkpoint();
    const two = checkpoint();
    await one.read();
    await one.write(5);
    expect(await two.read()).to.equal(5);
    await one.write(7);
    expect(await fencedOn(two.write(9))).to.be.instanceOf(RelayFenced);
    expect(await checkpoint().read()).to.equal(7);
  });

  it('fences a relay whose generation another one has moved on from, even when it could write that stream again', async () => {
    const one = checkpoint();
    const fresh = checkpoint();
    const started = checkpoint();
    await one.read();
    await fresh.read();
    await one.write(1);
    await started.read();
    for (let position = 2; position <= 8; position++) await one.write(position);
    expect(await generations()).to.have.length.at.least(2);
    // `fresh` expects no stream where one's first generation was deleted: only the pointer tells.
    expect(await fencedOn(fresh.write(100))).to.be.instanceOf(RelayFenced);
    expect(await fencedOn(started.write(100))).to.be.instanceOf(RelayFenced);
    expect(await checkpoint().read()).to.equal(8);
    await one.write(9);
    expect(await checkpoint().read()).to.equal(9);
  });

  it('after a crash between naming a generation and its first write, reads the one before and opens the new one once', async () => {
    await temp.log.append(generationStream(1), [checkpointed(7), checkpointed(8)], 'no_stream');
    await temp.log.append(RELAY_CHECKPOINT_GENERATIONS_STREAM, [generationStarted(1), generationStarted(2)], 'no_stream');
    const one = checkpoint();
    const two = checkpoint();
    expect(await one.read()).to.equal(8);
    expect(await two.read()).to.equal(8);
    await one.write(9);
    expect(await fencedOn(two.write(10))).to.be.instanceOf(RelayFenced);
    expect(await checkpoint().read()).to.equal(9);
    expect((await kept()).map((e) => [e.stream, e.data['position']])).to.deep.equal([[generationStream(2), 9]]);
  });

  it('reads the single stream of earlier versions, then deletes it once the first generation has its event', async () => {
    await temp.log.append(RELAY_CHECKPOINT_STREAM, [10, 20, 30, 40].map(checkpointed), 'no_stream');
    const upgraded = checkpoint();
    expect(await upgraded.read()).to.equal(40);
    await upgraded.write(50);
    expect(await temp.log.readStream(RELAY_CHECKPOINT_STREAM)).to.deep.equal([]);
    expect((await kept()).map((e) => [e.stream, e.data['position']])).to.deep.equal([[generationStream(1), 50]]);
    expect(await checkpoint().read()).to.equal(50);
  });

  it('reads the earlier stream after a crash before the first generation had its event', async () => {
    await temp.log.append(RELAY_CHECKPOINT_STREAM, [checkpointed(40)], 'no_stream');
    await temp.log.append(RELAY_CHECKPOINT_GENERATIONS_STREAM, [generationStarted(1)], 'no_stream');
    const upgraded = checkpoint();
    expect(await upgraded.read()).to.equal(40);
    await upgraded.write(50);
    expect(await temp.log.readStream(RELAY_CHECKPOINT_STREAM)).to.deep.equal([]);
    expect(await checkpoint().read()).to.equal(50);
  });
});
