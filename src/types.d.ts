// Files embedded into the binary as text (`import x from "./f" with { type: "text" }`).
declare module "*.sql" {
  const text: string;
  export default text;
}
declare module "*.css" {
  const text: string;
  export default text;
}
