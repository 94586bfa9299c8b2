// One lint config for every TypeScript project. The module-boundary rule keeps the
// dependency arrows of docs/ARCHITECTURE: config <- slurm-templates <- {runner, infra}, and the
// runner's libraries: schedulers <- planning <- run-record <- runs <- runner (no lib imports an app).
import js from '@eslint/js';
import nx from '@nx/eslint-plugin';
import prettier from 'eslint-config-prettier';
import tseslint from 'typescript-eslint';

export default [
  { ignores: ['**/dist/**', '**/node_modules/**', '.hpc/**', 'python/**', '**/__golden__/**', '.nx/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  prettier,
  {
    files: ['**/*.ts'],
    plugins: { '@nx': nx },
    rules: {
      '@nx/enforce-module-boundaries': [
        'error',
        {
          allow: [],
          enforceBuildableLibDependency: false,
          depConstraints: [
            { sourceTag: 'type:app', onlyDependOnLibsWithTags: ['type:lib'] },
            { sourceTag: 'type:infra', onlyDependOnLibsWithTags: ['type:lib'] },
            { sourceTag: 'scope:templates', onlyDependOnLibsWithTags: ['scope:config'] },
            { sourceTag: 'scope:config', onlyDependOnLibsWithTags: [] },
            { sourceTag: 'scope:usage', onlyDependOnLibsWithTags: ['scope:config'] },
            { sourceTag: 'scope:transport', onlyDependOnLibsWithTags: ['scope:config', 'scope:templates'] },
            { sourceTag: 'scope:schedulers', onlyDependOnLibsWithTags: ['scope:transport'] },
            {
              sourceTag: 'scope:planning',
              onlyDependOnLibsWithTags: [
                'scope:config',
                'scope:templates',
                'scope:usage',
                'scope:schedulers',
                'scope:transport',
              ],
            },
            {
              sourceTag: 'scope:run-record',
              onlyDependOnLibsWithTags: [
                'scope:config',
                'scope:usage',
                'scope:planning',
                'scope:schedulers',
                'scope:transport',
              ],
            },
            {
              sourceTag: 'scope:runs',
              onlyDependOnLibsWithTags: [
                'scope:config',
                'scope:templates',
                'scope:usage',
                'scope:planning',
                'scope:schedulers',
                'scope:transport',
                'scope:run-record',
              ],
            },
          ],
        },
      ],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
];
