// Live usage from GET /v1/boxes/{box}/stats: the API gives the VMM's CPU time so far; the CPU
// share is the difference between two samples over the time between them (100% = one host CPU).

import type { BoxStats } from "./api";

export interface Sample {
  at: number; // ms, performance.now()
  cpuPercent: number | null; // null for the first sample
  memoryBytes: number;
  memoryMaxBytes: number;
}

const kKept = 60;

export class StatsHistory {
  private readonly samples = new Map<string, Sample[]>();
  private readonly lastCpu = new Map<string, { at: number; cpuNs: number }>();

  add(boxId: string, stats: BoxStats, at: number): Sample {
    const last = this.lastCpu.get(boxId);
    let cpuPercent: number | null = null;
    if (last && at > last.at && stats.cpu_ns >= last.cpuNs) {
      cpuPercent = ((stats.cpu_ns - last.cpuNs) / ((at - last.at) * 1e6)) * 100;
    }
    this.lastCpu.set(boxId, { at, cpuNs: stats.cpu_ns });
    const sample: Sample = {
      at,
      cpuPercent,
      memoryBytes: stats.memory.bytes,
      memoryMaxBytes: stats.memory.max_bytes,
    };
    const list = this.samples.get(boxId) ?? [];
    list.push(sample);
    if (list.length > kKept) list.splice(0, list.length - kKept);
    this.samples.set(boxId, list);
    return sample;
  }

  // A box that stopped: its next sample starts a new CPU measurement.
  forget(boxId: string): void {
    this.lastCpu.delete(boxId);
  }

  latest(boxId: string): Sample | undefined {
    const list = this.samples.get(boxId);
    return list ? list[list.length - 1] : undefined;
  }

  history(boxId: string): Sample[] {
    return this.samples.get(boxId) ?? [];
  }

  // Drops boxes that are gone.
  keepOnly(ids: Set<string>): void {
    for (const id of [...this.samples.keys()]) {
      if (!ids.has(id)) {
        this.samples.delete(id);
        this.lastCpu.delete(id);
      }
    }
  }
}
