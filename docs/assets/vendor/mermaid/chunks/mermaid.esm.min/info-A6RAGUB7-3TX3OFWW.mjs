import{a as o,b as e}from"./chunk-3NPNU5GP.mjs";import"./chunk-ZS6VBONO.mjs";import"./chunk-AQ6EADP3.mjs";export{o as InfoModule,e as createInfoServices};
