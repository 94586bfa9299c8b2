// The environment frontends by name (ENVIRONMENT_FRONTENDS of @kdgat/config): the one place a
// frontend is chosen. Each module implements frontend.ts's interface.
import type { EnvironmentFrontend } from '@kdgat/config';
import { conda, mamba } from './conda.ts';
import type { Frontend } from './frontend.ts';
import { micromamba } from './micromamba.ts';
import { pip } from './pip.ts';
import { rattler } from './rattler.ts';

export type { Frontend, FrontendPlan, FrontendTarget, PackageEntry } from './frontend.ts';

const FRONTENDS: Record<EnvironmentFrontend, Frontend> = { conda, mamba, micromamba, rattler, pip };

export function frontendFor(name: EnvironmentFrontend): Frontend {
  const frontend = FRONTENDS[name];
  if (!frontend) {
    throw new Error(`unknown environment frontend '${name}' (expected ${Object.keys(FRONTENDS).join(', ')})`);
  }
  return frontend;
}

/** Files beside the spec that any frontend may have written (a stack can change frontend between builds). */
export function frontendFiles(specPath: string): string[] {
  return Object.values(FRONTENDS).flatMap((f) => f.files(specPath));
}
