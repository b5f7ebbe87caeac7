// Types of bin/entry-point.js, for the tests that check which build a command runs.

export declare const BUILD_INFO: string;
export declare const BUILD_INPUTS: readonly string[];
export declare function currentBuildOf(root: string, source: string): string | undefined;
export declare function importEntry(source: string): Promise<unknown>;
