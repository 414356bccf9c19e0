// ESLint flat config, run by `npm run lint` (with Prettier and knip) and `npm run lint:fix`. Type-aware: the rules
// read the types of tsconfig.json's files through the TypeScript project service.
import { builtinModules, isBuiltin } from 'node:module';
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

// Every Node built-in in both spellings (`fs` and `node:fs`), plus the few that exist only as `node:…`.
const bareBuiltins = builtinModules.map((name) => name.replace(/^node:/, ''));
const prefixOnly = ['node:sea', 'node:sqlite', 'node:test', 'node:test/reporters'].filter((name) => isBuiltin(name));
const nodeBuiltins = [...new Set([...bareBuiltins, ...bareBuiltins.map((name) => `node:${name}`), ...prefixOnly])];
const sandboxBanned = ['@kubernetes/client-node', '@temporalio/activity', '@temporalio/worker', '@temporalio/client'];
const SANDBOX =
  "workflow code runs in Temporal's deterministic sandbox: no Node built-ins, no I/O and no SDK package but " +
  '@temporalio/workflow (and @temporalio/common). Do the work in an activity and call it through proxyActivities.';

export default tseslint.config(
  {
    ignores: ['node_modules/', 'test/unit/golden/', 'test/histories/*.json', '.ferry/', 'dist/', 'coverage/'],
  },
  {
    linterOptions: { reportUnusedDisableDirectives: 'error' },
  },
  {
    files: ['**/*.js', '**/*.mjs'],
    extends: [js.configs.recommended],
    // Plain JavaScript here runs on Node: the bins, the configs, and the consumer programs of the package test.
    languageOptions: {
      globals: { process: 'readonly', console: 'readonly', URL: 'readonly' },
    },
  },
  {
    files: ['{workflows,activities,worker,client,deploy,test,bench}/**/*.ts', '*.ts'],
    extends: [js.configs.recommended, ...tseslint.configs.recommendedTypeChecked],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/consistent-type-imports': [
        'error',
        { prefer: 'type-imports', fixStyle: 'inline-type-imports' },
      ],
      '@typescript-eslint/no-unused-vars': [
        'error',
        {
          argsIgnorePattern: '^_',
          varsIgnorePattern: '^_',
          caughtErrorsIgnorePattern: '^_',
          destructuredArrayIgnorePattern: '^_',
          ignoreRestSiblings: true,
        },
      ],
      // Stubs and adapters implement Promise-returning interfaces with `async` and no await, on purpose (a throw
      // then becomes a rejection); no-floating-promises and no-misused-promises catch the real async mistakes.
      '@typescript-eslint/require-await': 'off',
    },
  },
  {
    files: ['test/**/*.ts'],
    rules: {
      // Tests pass activities by reference (`activity(acts.claimName, …)`): the contract declares them as method
      // signatures, but createActivities builds them as arrow closures that never use `this`.
      '@typescript-eslint/unbound-method': 'off',
      // Tests read JSON.parse output, kubectl output and wire payloads as `any` and assert on them with expect().
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
    },
  },
  {
    files: ['workflows/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [...nodeBuiltins, ...sandboxBanned].map((name) => ({ name, message: SANDBOX })),
          patterns: [{ group: sandboxBanned.map((name) => `${name}/*`), message: SANDBOX }],
        },
      ],
    },
  },
);
