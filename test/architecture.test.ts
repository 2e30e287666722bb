// The house rules that no single file can check (docs/architecture.md):
// - one declaration per exported name across src/ (a re-export is not a declaration; function
//   overloads in one file are one declaration), so a name means one thing wherever it is read;
// - the floors hold (dependency-cruiser, the same check `npm run lint` runs), so no file imports
//   upward and core/ imports nothing of the project;
// - no chart casts its way around XState's types, and no chart writes a reply by hand.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..');
const SRC = join(ROOT, 'src');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') ? [path] : [];
  });
}

function isExported(node: ts.Node): boolean {
  return (
    ts.canHaveModifiers(node) &&
    (ts.getModifiers(node) ?? []).some((m) => m.kind === ts.SyntaxKind.ExportKeyword)
  );
}

/** Names a file declares and exports (not re-exports), once each. */
function exportedDeclarations(file: string): Set<string> {
  const text = readFileSync(file, 'utf8');
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, false);
  const names = new Set<string>();
  for (const statement of source.statements) {
    if (!isExported(statement)) continue;
    if (ts.isVariableStatement(statement)) {
      for (const d of statement.declarationList.declarations) {
        if (ts.isIdentifier(d.name)) names.add(d.name.text);
      }
    } else if (
      (ts.isFunctionDeclaration(statement) ||
        ts.isClassDeclaration(statement) ||
        ts.isInterfaceDeclaration(statement) ||
        ts.isTypeAliasDeclaration(statement) ||
        ts.isEnumDeclaration(statement)) &&
      statement.name
    ) {
      names.add(statement.name.text);
    }
  }
  return names;
}

describe('the house rules', () => {
  it('declares each exported name once across src/', () => {
    const owners = new Map<string, string[]>();
    for (const file of sourceFiles(SRC)) {
      for (const name of exportedDeclarations(file)) {
        const list = owners.get(name) ?? [];
        list.push(relative(ROOT, file));
        owners.set(name, list);
      }
    }
    const duplicates = [...owners]
      .filter(([, files]) => files.length > 1)
      .map(([name, files]) => `${name}: ${files.join(', ')}`);
    expect(owners.size).toBeGreaterThan(300);
    expect(duplicates).toEqual([]);
  });

  it('keeps the floors: dependency-cruiser finds no violation', () => {
    const bin = join(ROOT, 'node_modules', '.bin', 'depcruise');
    const run = () =>
      execFileSync(bin, ['src', '--config', '.dependency-cruiser.cjs', '--output-type', 'json'], {
        cwd: ROOT,
        encoding: 'utf8',
        maxBuffer: 64 * 1024 * 1024,
      });
    const report = JSON.parse(run()) as {
      summary: { violations: { rule: { name: string }; from: string; to: string }[] };
      modules: unknown[];
    };
    const violations = report.summary.violations.map((v) => `${v.rule.name}: ${v.from} → ${v.to}`);
    expect(report.modules.length).toBeGreaterThan(80);
    expect(violations).toEqual([]);
  }, 60_000);

  it('lets no chart cast through unknown or build a reply by hand', () => {
    const machines = sourceFiles(join(SRC, 'machines'));
    expect(machines.length).toBeGreaterThan(9);
    const offences = machines.flatMap((file) => {
      const text = readFileSync(file, 'utf8');
      const out: string[] = [];
      if (text.includes('as unknown as')) out.push(`${relative(ROOT, file)}: as unknown as`);
      if (/type: 'reply'/.test(text)) out.push(`${relative(ROOT, file)}: hand-built reply`);
      return out;
    });
    expect(offences).toEqual([]);
  });
});
