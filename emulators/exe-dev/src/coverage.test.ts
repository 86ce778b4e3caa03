// The README's coverage table against what the emulator knows of exe.dev: every lobby command and
// SSH request classified, what is served is exactly what the emulator runs, and the table current.
import { readFileSync, writeFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { coverageReport, coverageTable, withCoverageTable } from "@paperclip-sandbox/emulator-kit";
import { exeDevCommandNames, isImplemented } from "./commands.js";
import { EXE_DEV_COVERAGE, exeDevOperations } from "./coverage.js";

describe("coverage", () => {
  it("classifies every exe.dev command and SSH request, serves exactly the commands it runs, and the README's table is current", () => {
    const report = coverageReport(EXE_DEV_COVERAGE, exeDevOperations());
    expect(report.unclassified).toEqual([]);
    expect(report.stale).toEqual([]);
    expect(report.counts["not yet"]).toBe(0);
    const servedCommands = report.rows.filter((row) => row.group === "/exec command" && row.status === "served").map((row) => row.name);
    expect(servedCommands.sort()).toEqual(
      exeDevCommandNames()
        .filter((name) => isImplemented([name]))
        .sort(),
    );
    const readmeUrl = new URL("../README.md", import.meta.url);
    const readme = readFileSync(readmeUrl, "utf8");
    // UPDATE_COVERAGE=1 rewrites the README's generated table (between its coverage markers).
    if (process.env.UPDATE_COVERAGE) writeFileSync(readmeUrl, withCoverageTable(readme, coverageTable(report)));
    else expect(readme).toContain(coverageTable(report));
  });
});
