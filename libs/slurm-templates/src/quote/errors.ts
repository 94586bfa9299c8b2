/** The error type of this layer: names the field, the value and what was expected. */
export class TemplateInputError extends Error {
  readonly field: string;
  readonly value: unknown;
  readonly expected: string;

  constructor(field: string, value: unknown, expected: string) {
    super(`slurm-templates: ${field} = ${JSON.stringify(value)}: expected ${expected}`);
    this.name = 'TemplateInputError';
    this.field = field;
    this.value = value;
    this.expected = expected;
  }
}
