// Signals travel as numbers. The box is Linux whatever the client's OS, so names are looked up
// in Linux's table, not in os.constants.signals (whose numbers differ on macOS).

import { InvalidArgumentError } from "./errors.js";

export type SignalName =
  | "SIGHUP" | "SIGINT" | "SIGQUIT" | "SIGILL" | "SIGTRAP" | "SIGABRT" | "SIGBUS" | "SIGFPE"
  | "SIGKILL" | "SIGUSR1" | "SIGSEGV" | "SIGUSR2" | "SIGPIPE" | "SIGALRM" | "SIGTERM"
  | "SIGCHLD" | "SIGCONT" | "SIGSTOP" | "SIGTSTP" | "SIGTTIN" | "SIGTTOU" | "SIGURG"
  | "SIGXCPU" | "SIGXFSZ" | "SIGVTALRM" | "SIGPROF" | "SIGWINCH" | "SIGIO" | "SIGPWR" | "SIGSYS";

/** A signal number (Linux) or name ("SIGTERM", "TERM"). */
export type Signal = number | SignalName | string;

export const linuxSignals: Readonly<Record<SignalName, number>> = {
  SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGILL: 4, SIGTRAP: 5, SIGABRT: 6, SIGBUS: 7, SIGFPE: 8,
  SIGKILL: 9, SIGUSR1: 10, SIGSEGV: 11, SIGUSR2: 12, SIGPIPE: 13, SIGALRM: 14, SIGTERM: 15,
  SIGCHLD: 17, SIGCONT: 18, SIGSTOP: 19, SIGTSTP: 20, SIGTTIN: 21, SIGTTOU: 22, SIGURG: 23,
  SIGXCPU: 24, SIGXFSZ: 25, SIGVTALRM: 26, SIGPROF: 27, SIGWINCH: 28, SIGIO: 29, SIGPWR: 30,
  SIGSYS: 31,
};

export function signalNumber(signal: Signal): number {
  if (typeof signal === "number") {
    if (!Number.isInteger(signal) || signal < 1 || signal > 64) {
      throw new InvalidArgumentError(`Signal ${signal} is not a signal number (1-64)`);
    }
    return signal;
  }
  const upper = signal.toUpperCase();
  const name = (upper.startsWith("SIG") ? upper : `SIG${upper}`) as SignalName;
  const n = linuxSignals[name];
  if (n === undefined) {
    throw new InvalidArgumentError(`Unknown signal '${signal}'; use a number or a name such as SIGTERM`);
  }
  return n;
}
