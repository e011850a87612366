/** How the CLI's commands end after a signal, as a shell reports a process it ended (128 + n). */
export const SIGNAL_EXIT = { SIGINT: 130, SIGTERM: 143 } as const;

/** A signal that stops a command. */
export type StopSignal = keyof typeof SIGNAL_EXIT;
