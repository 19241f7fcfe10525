import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import prettier from 'eslint-config-prettier';

export default tseslint.config(
  {
    ignores: [
      'node_modules/',
      'contract/dist/',
      'server/generated/',
      'data/',
      '.test-data/',
      'coverage/',
      'dist/',
      'scratch/',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  // Layout is Prettier's (npm run format); ESLint keeps to what the code means.
  prettier,
  {
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
      'no-console': 'off',
      // `interface Task extends z.output<typeof taskSchema> {}` names a schema's type once for declaration files.
      '@typescript-eslint/no-empty-object-type': ['error', { allowInterfaces: 'with-single-extends' }],
    },
  },
);
