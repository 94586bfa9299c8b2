import { describe, expect, it } from 'vitest';
import { chooseCluster, placementLines, runStart, type PlacementCandidate } from './placement.ts';

const stage = (stageId: string, start: string) => ({
  stageId,
  ok: true,
  start,
  message: `Job 1 to start at ${start}`,
});

function cluster(
  name: string,
  start: string,
  worst: number,
  extra: Partial<PlacementCandidate> = {},
): PlacementCandidate {
  return {
    cluster: name,
    clusterName: name,
    // Pitzer is the spec's own cluster here; the others are reached with -M.
    ...(name === 'pitzer' ? {} : { via: name }),
    fits: true,
    stages: [stage('train', start)],
    start,
    cost: { unit: 'SU', worst, expected: worst / 2 },
    withinBudget: true,
    ...extra,
  };
}

describe('placement: --cluster auto', () => {
  it('takes the earliest expected start, whatever it costs', () => {
    const { chosen, why } = chooseCluster([
      cluster('pitzer', '2026-11-27T23:40:00', 10),
      cluster('ascend', '2026-11-27T22:05:00', 30),
    ]);
    expect(chosen?.cluster).toBe('ascend');
    expect(why).toBe('expected start 2026-11-27T22:05:00; earlier than pitzer (2026-11-27T23:40:00)');
  });

  it('gives a tie (starts within 5 minutes) to the cheaper worst case', () => {
    const { chosen, why } = chooseCluster([
      cluster('ascend', '2026-11-27T22:05:00', 30),
      cluster('pitzer', '2026-11-27T22:09:59', 10),
      cluster('cardinal', '2026-11-28T01:00:00', 5),
    ]);
    expect(chosen?.cluster).toBe('pitzer');
    expect(why).toContain('cheaper than ascend (15 expected, 30 worst SU)');
    expect(why).toContain('earlier than cardinal');
  });

  it('leaves out a cluster over the budget or where the spec does not fit, and says so', () => {
    const { chosen, why } = chooseCluster([
      cluster('ascend', '2026-11-27T22:05:00', 300, { withinBudget: false }),
      cluster('cardinal', '2026-11-27T22:00:00', 1, {
        fits: false,
        reason: 'partition cpu: not a partition of cardinal',
      }),
      cluster('pitzer', '2026-11-27T23:00:00', 10),
    ]);
    expect(chosen?.cluster).toBe('pitzer');
    expect(why).toContain('ascend is over the budget');
    expect(why).toContain('cardinal does not fit (partition cpu: not a partition of cardinal)');
  });

  it('chooses none when no cluster qualifies, naming each reason', () => {
    const { chosen, why } = chooseCluster([
      cluster('ascend', '2026-11-27T22:05:00', 300, { withinBudget: false }),
      cluster('pitzer', '2026-11-27T22:05:00', 10, {
        fits: false,
        reason: 'train: QOSMaxWallDurationPerJobLimit',
      }),
    ]);
    expect(chosen).toBeUndefined();
    expect(why).toBe(
      'no cluster can run it (ascend: over the budget; pitzer: train: QOSMaxWallDurationPerJobLimit)',
    );
  });

  it("a run's start is its latest stage's; unknown when a stage has none", () => {
    expect(runStart([stage('a', '2026-11-27T22:05:00'), stage('b', '2026-11-27T22:30:00')])).toBe(
      '2026-11-27T22:30:00',
    );
    expect(
      runStart([stage('a', '2026-11-27T22:05:00'), { stageId: 'b', ok: true, message: '' }]),
    ).toBeUndefined();
    expect(runStart([])).toBeUndefined();
  });

  it('prints every cluster and stage, the chosen one marked', () => {
    const candidates = [
      cluster('pitzer', '2026-11-27T23:40:00', 10),
      cluster('ascend', '2026-11-27T22:05:00', 30),
    ];
    const lines = placementLines({
      cluster: 'ascend',
      clusterName: 'ascend',
      mode: 'auto',
      why: 'w',
      candidates,
    });
    expect(lines).toEqual([
      "  cluster pitzer (the login node's own): starts 2026-11-27T23:40:00, 5.00 expected, 10 worst SU",
      '    train: fits, starts 2026-11-27T23:40:00',
      '* cluster ascend (-M ascend): starts 2026-11-27T22:05:00, 15 expected, 30 worst SU',
      '    train: fits, starts 2026-11-27T22:05:00',
      'placement: cluster ascend (auto): w',
    ]);
  });

  it("prints a stage's charge there, and the controller's refusal", () => {
    const refused = cluster('cardinal', '2026-11-27T22:05:00', 3, {
      fits: false,
      reason: 'train: Requested node configuration is not available',
      stages: [
        {
          stageId: 'prep',
          ok: true,
          worst: 0.5,
          start: '2026-11-27T22:05:00',
          partition: 'cpu',
          nodes: 'c0001',
          message: '',
        },
        {
          stageId: 'train',
          ok: false,
          worst: null,
          message: 'Requested node configuration is not available',
        },
      ],
    });
    const lines = placementLines({
      cluster: 'cardinal',
      clusterName: 'cardinal',
      mode: 'named',
      why: '--cluster cardinal',
      candidates: [refused],
    });
    expect(lines.slice(0, 3)).toEqual([
      '* cluster cardinal (-M cardinal): does not fit: train: Requested node configuration is not available',
      '    prep: fits, starts 2026-11-27T22:05:00 in cpu on c0001, worst 0.50 SU',
      '    train: refused: Requested node configuration is not available, no rates',
    ]);
  });
});
