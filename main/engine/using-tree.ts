/** Runs `use` on `tree`, then closes the metadata CAR file its nodes are read from. */
export async function usingTree<Tree extends { close(): void }, T>(
  tree: Tree,
  use: (tree: Tree) => Promise<T>,
): Promise<T> {
  try {
    return await use(tree);
  } finally {
    tree.close();
  }
}
