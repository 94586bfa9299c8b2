// What the run's phases and the shell refuse as bad input: the command line prints the message with a
// pointer to --help (exit 2).
export class UsageError extends Error {}
